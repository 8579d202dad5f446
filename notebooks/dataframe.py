# %% [markdown]
# # A table of squares
#
# Builds a small DataFrame and records it with scrapbook, together with a JSON summary.

# %% tags=["parameters"]
n: int = 5  # number of rows
label: str = "squares"  # name of the value column

# %%
import pandas as pd
import scrapbook as sb

frame = pd.DataFrame({"x": range(n), label: [i * i for i in range(n)]})
frame

# %%
sb.glue("table", frame)
sb.glue("total", int(frame[label].sum()))

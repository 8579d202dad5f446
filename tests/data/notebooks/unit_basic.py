# %% [markdown]
# # Basic
#
# A small percent script.

# %% tags=["parameters"]
name: str = "world"  # who to greet
count: int = 2  # how many times

# %%
for _ in range(count):
    print(f"Hello, {name}!")

# %% [markdown]
# The end.

# %%
import scrapbook as sb

sb.glue("greeting", f"Hello, {name}!")

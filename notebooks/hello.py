# %% [markdown]
# # Hello
#
# The smallest useful notebook: greets someone and records the greeting.

# %% tags=["parameters"]
name: str = "world"  # who to greet
times: int = 1  # how many times to greet

# %%
import scrapbook as sb

greeting = f"Hello, {name}!"
for _ in range(times):
    print(greeting)

# %%
sb.glue("greeting", greeting)
sb.glue("length", len(greeting))

"""Sources: notebooks read and written in every supported format, within bounds, or at URLs."""

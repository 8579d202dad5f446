"""Parameters: those a notebook declares, the values given, placeholders, declared environment."""

"""Sessions: a live kernel stepped through cell by cell, with restores after an edit."""

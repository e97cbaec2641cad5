"""tierlab.analysis — figures and tables, one module per figure; they read result tables only."""

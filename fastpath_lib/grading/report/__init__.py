"""The reports: feedback and Gradescope's results.json."""

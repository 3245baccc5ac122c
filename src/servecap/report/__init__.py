"""Reports: every HTML page servecap writes (self-contained, plotly.js inlined, works offline) and
the text renderings they share — one module per page."""

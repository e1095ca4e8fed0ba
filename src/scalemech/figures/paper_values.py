"""Numbers the papers report, which the report and the figures set beside this project's measurements."""

PAPER_W_DALIGN = {512: 3.9, 3072: 9.5}  # Paper W: d_align of LLaMA-style transformers by width

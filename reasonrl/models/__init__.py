"""Models: loading any Hugging Face causal LM, and bootstrapping the tiny demo model offline."""

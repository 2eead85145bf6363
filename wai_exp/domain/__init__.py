"""The shared vocabulary every layer may import: it imports nothing of wai_exp's own."""

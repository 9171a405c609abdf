"""The only package that imports Textual."""

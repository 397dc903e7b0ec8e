"""The site generator: Markdown + committed fixtures -> a static site in public/. Never imports torch."""

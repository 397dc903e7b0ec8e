"""Model families, the adapter over them, the clean-run cache, and the organisms' word tokenizer."""

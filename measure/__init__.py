"""The torch job stage: measures reward models and writes study bundles."""

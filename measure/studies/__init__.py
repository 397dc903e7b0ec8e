"""One package per study: its data builder, its model builder or trainer, its bundle text."""

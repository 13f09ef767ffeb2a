"""Documents in the window: the Collections window, the Docs chooser, and the thread that reads files."""

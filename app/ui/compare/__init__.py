"""The Compare window: targets from the model picker, prompts, the run, the table, texts and chart."""

"""The Models window and the first-launch panel: get a better model without leaving the window.

The bundled Gemma 3 270M is a tiny base model for trying the app, and its answers show it;
this package is how a user gets an instruction-tuned model instead, from inside the window:
search the Hugging Face Hub (each file with its quantization, size and a fit label for this
machine), download with Pause / Resume / Cancel, list, delete and use what was downloaded.

All of it drives app.hub, the same code `llamadesk models search` and `llamadesk pull` run,
so the window and the command line cannot disagree on what was verified. The network and
the hashing run on two worker threads (worker.py, service.py): searches and the library's
listing on one, a download on the other, so a search answers while a file comes in.
hookup.py is what the main window adds (the Model menu, the first-launch panel); window.py
assembles the Models window from results.py (the search), transfer.py (the download) and
library_view.py (what is on disk).
"""

"""Batch files: OpenAI Batch API JSONL in, OpenAI batch output records out, resumable. No Qt.

Reading, resuming and journaling are file work, not decoding work: this
package drives app.slots and is shared by `llamadesk batch` and the window.
"""

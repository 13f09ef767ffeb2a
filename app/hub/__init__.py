"""Getting a better model without leaving LlamaDesk: find GGUFs on the Hugging Face Hub, tell
before downloading whether one fits this machine, and download it so that nothing short of a
verified file ever becomes visible as a model.

Qt-free, so the command line has it today and the window's Models panel can drive the same
code later. huggingface_hub answers the questions about the Hub (what is there, its sha256,
who may read it, where the endpoint is); the transfer itself is ours (app.hub.download),
because huggingface_hub cannot resume a file across processes.
"""

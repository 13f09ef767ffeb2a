# Sourced by the packaging scripts: the Python that runs LlamaDesk here, and its llama-cpp-python.
#
#   py               .venv/bin/python if the README's install made one, else python3
#   llama_version    the installed llama-cpp-python version; prints nothing when it is absent

py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python

llama_version() {
  "$py" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))' 2>/dev/null
}

"""An MCP server over stdio that misbehaves on purpose, speaking JSON-RPC by hand (no SDK).

    python hostile.py crash         answers the start, then dies in the middle of a call,
                                    leaving a child of its own behind (its pid in CHILD_PID_FILE)
    python hostile.py silent        answers the start, never answers a call
    python hostile.py silent-start  never answers initialize
    python hostile.py garbage       answers initialize with a line that is not JSON
    python hostile.py many N        lists N tools and answers each call with its name
    python hostile.py parent        behaves, but starts a child of its own (pid in CHILD_PID_FILE)
    python hostile.py no-tools      has no tools/list at all (a server of prompts or resources only)
"""

import json
import os
import subprocess
import sys


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def tool(name, description):
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def main():
    mode = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    tools = ([tool(f"tool_{i:03d}", f"Tool number {i}: returns its own name, for counting definitions.")
              for i in range(count)] if mode == "many" else [tool("work", "Does some work.")])
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if method == "initialize":
            if mode == "parent":
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                with open(os.environ["CHILD_PID_FILE"], "w") as f:
                    f.write(str(child.pid))
            if mode == "silent-start":
                continue
            if mode == "garbage":
                sys.stdout.write("Server starting... this is not JSON\n")
                sys.stdout.flush()
                continue
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": f"hostile-{mode}", "version": "0"}}})
        elif method == "tools/list" and mode != "no-tools":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call":
            if mode == "crash":
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                with open(os.environ["CHILD_PID_FILE"], "w") as f:
                    f.write(str(child.pid))
                sys.stderr.write("hostile: fell over in the middle of a call\n")
                sys.stderr.flush()
                os._exit(3)
            if mode == "silent":
                continue
            name = msg["params"]["name"]
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": name}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()

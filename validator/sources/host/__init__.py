"""The host the server runs on: /proc and /sys, its processes (which of them serve SGLang) and listening
sockets, the kernels installed for the server's interpreter, and the checkpoint on its disks."""

"""What a launch says will run: the command line, a systemd unit, a launcher script, a docker or Compose
command, a Kubernetes manifest, the environment files they name, the supervisor's start budget, and what
differs from the server that runs (drift) or what `launch` last decided (state)."""

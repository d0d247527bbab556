#!/usr/bin/env bash
# Private Docker Engine for dev, tests and CI (Debian docker.io + containerd).
#
#   scripts/docker.sh start    install if absent, start containerd then dockerd,
#                              wait until the API answers; no-op when it already does
#   scripts/docker.sh stop     stop only the daemons this script started (by PID)
#   scripts/docker.sh status
#
# dockerd runs with --bridge=none --iptables=false --ip-forward=false: every
# sandbox uses --network none, so no bridge is needed. Logs and PIDs live in
# <repo>/.run/docker/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=$PWD/.run/docker
SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
CTRD_SOCK=/run/containerd/containerd.sock
log() { echo "[docker.sh] $*"; }

api_ok() { # the daemon answers on the socket
	[[ -S $SOCK ]] && curl -fsS --max-time 2 --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1
}
ctrd_ok() { [[ -S $CTRD_SOCK ]] && ctr --address "$CTRD_SOCK" version >/dev/null 2>&1; }
alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install() {
	if command -v dockerd >/dev/null && command -v containerd >/dev/null && command -v curl >/dev/null; then
		return
	fi
	log "installing docker.io, containerd and curl from Debian packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q docker.io containerd curl >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q docker.io containerd curl >/dev/null; }
	# The package's units may have started a daemon; that is fine, we reuse it.
}

wait_for() { # what, seconds, command...
	local what=$1 secs=$2
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	log "$what did not come up within ${secs}s"
	return 1
}

start() {
	install
	if api_ok; then
		log "docker API already answers on $SOCK"
		return 0
	fi
	mkdir -p "$RUN"
	if ctrd_ok; then
		log "containerd already running"
	else
		log "starting containerd (log $RUN/containerd.log)"
		setsid containerd >"$RUN/containerd.log" 2>&1 </dev/null &
		echo $! >"$RUN/containerd.pid"
		wait_for containerd 30 ctrd_ok || { tail -n 20 "$RUN/containerd.log" >&2; exit 1; }
	fi
	# A daemon killed hard (e.g. when a previous session or CI run was ended)
	# leaves its pid file behind, and dockerd refuses to start over it.
	local pidf=/var/run/docker.pid
	local oldpid
	oldpid=$(cat "$pidf" 2>/dev/null || echo 0)
	if [[ -f $pidf ]] && ! { grep -qs dockerd "/proc/$oldpid/comm" && ! grep -qs '^State:.*Z' "/proc/$oldpid/status"; }; then
		log "removing stale $pidf"
		rm -f "$pidf"
	fi
	log "starting dockerd (log $RUN/dockerd.log)"
	setsid dockerd --bridge=none --iptables=false --ip-forward=false \
		--containerd="$CTRD_SOCK" -H "unix://$SOCK" >"$RUN/dockerd.log" 2>&1 </dev/null &
	echo $! >"$RUN/dockerd.pid"
	wait_for dockerd 60 api_ok || { tail -n 20 "$RUN/dockerd.log" >&2; exit 1; }
	log "docker API answers: $(curl -fsS --unix-socket "$SOCK" http://localhost/version | grep -o '"Version":"[^"]*"' | head -n1)"
}

stop_pid() { # name
	local f=$RUN/$1.pid pid
	if ! alive "$f"; then
		rm -f "$f"
		return 0
	fi
	pid=$(cat "$f")
	log "stopping $1 (pid $pid)"
	kill -TERM "$pid"
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
		sleep 0.1
	done
	log "$1 did not stop in 30s; killing"
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$f"
}

case ${1:-} in
start) start ;;
stop)
	stop_pid dockerd
	stop_pid containerd
	;;
status)
	if api_ok; then echo "docker: up"; else echo "docker: down"; fi
	for n in dockerd containerd; do
		if alive "$RUN/$n.pid"; then echo "$n: started by this script, pid $(cat "$RUN/$n.pid")"; fi
	done
	;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac

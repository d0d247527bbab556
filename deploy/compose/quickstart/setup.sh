#!/bin/sh
# The quick start's admin steps, run by `docker-compose up -d` itself in two
# one-shot services of compose.yaml (as root, on the node image, with the
# control image's kece-control and kecectl mounted at /opt/kece/bin):
#   setup.sh setup    before the nodes start: state directories, the judge
#                     DSN, the admin and business tokens, the host group, the
#                     nodes and their join codes (each node joins with its
#                     code on its first start, KECE_JOIN_CODE_FILE)
#   setup.sh enable   once the nodes run: verify and enable each
# Both may run again at every `up`: they skip what exists. Tokens land in
# $KECE_QS_DIR/admin.token and $KECE_QS_DIR/business.token (0600).
set -eu
PATH=/opt/kece/bin:$PATH
qs=${KECE_QS_DIR:?}
export KECE_ADMIN_URL=http://127.0.0.1:8090
dsn='root@tcp(127.0.0.1:33071)/kece'
pools="cpp python mysql"
log() { echo "[quickstart $(date +%H:%M:%S)] $*" >&2; }
token() { # kind name file: a new token into file unless it holds one
	[ -s "$3" ] && return 0
	(umask 077 && kece-control token create --mysql-dsn "$dsn" --kind "$1" --name "$2-$(date +%s)" >"$3.new")
	mv "$3.new" "$3"
}

setup() {
	install -d -m 0755 "$qs"
	install -d -m 0700 "$qs/cpp" "$qs/python"
	install -d -m 0700 -o 65532 -g 65532 "$qs/mysql"
	if [ ! -f "$qs/mysql/judge-dsn" ]; then
		install -m 0400 -o 65532 -g 65532 /dev/null "$qs/mysql/judge-dsn"
		echo 'root@tcp(127.0.0.1:33072)/' >"$qs/mysql/judge-dsn"
	fi
	token admin quickstart-admin "$qs/admin.token"
	token business quickstart-oj "$qs/business.token"
	KECE_ADMIN_TOKEN=$(cat "$qs/admin.token")
	export KECE_ADMIN_TOKEN
	kecectl host-group list | grep -q '\bquickstart\b' || kecectl host-group create --name quickstart --slots 8 >&2
	for pool in $pools; do
		d=$qs/$pool
		[ -f "$d/credential" ] && continue
		log "node qs-$pool: join code for its first start"
		if kecectl node list | grep -q "\bqs-$pool\b"; then
			out=$(kecectl node join-code "qs-$pool")
		else
			out=$(kecectl node create --name "qs-$pool" --pool "$pool" --group quickstart --slots 2)
		fi
		code=$(echo "$out" | grep -o 'kjc_[A-Za-z0-9_-]*' | head -n1)
		owner=0
		[ "$pool" = mysql ] && owner=65532
		install -m 0600 -o "$owner" -g "$owner" /dev/null "$d/join-code"
		echo "$code" >"$d/join-code"
	done
}

enable() {
	KECE_ADMIN_TOKEN=$(cat "$qs/admin.token")
	export KECE_ADMIN_TOKEN
	for pool in $pools; do
		if ! kecectl node show "qs-$pool" | grep -q 'ENABLED'; then
			# Verified only once online: the check records the runtime the
			# node reports when its session opens.
			i=0
			until kecectl node list | grep -Eq "^[0-9]+\s+qs-$pool\s+\S+\s+\S+\s+\S+\s+yes\s"; do
				i=$((i + 1))
				if [ "$i" -gt 300 ]; then
					log "node qs-$pool: not online after 300 s (docker-compose logs $pool-node)"
					exit 1
				fi
				sleep 1
			done
			log "node qs-$pool: verify and enable"
			kecectl node verify "qs-$pool" --reason "quick start" --wait >&2
			kecectl node enable "qs-$pool" --reason "quick start" --wait >&2
		fi
		rm -f "$qs/$pool/join-code"
	done
	log "ready: console http://127.0.0.1:8090/console/ (admin token in $qs/admin.token), business token in $qs/business.token"
}

case ${1:-} in
setup) setup ;;
enable) enable ;;
*)
	echo "usage: setup.sh setup|enable" >&2
	exit 2
	;;
esac

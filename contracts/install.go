package contracts

// NodeCredentialFile is where a node's credential lives under the systemd
// units: their StateDirectory=kece/node-%i is /var/lib/kece/node-<name>/,
// and the env examples set KECE_CREDENTIAL_FILE to this path. kecectl and
// the console print it in the `kece-node join` command, so the command
// works as pasted on the judge host (deploy tests keep the three in step).
func NodeCredentialFile(node string) string { return "/var/lib/kece/node-" + node + "/credential" }

// JoinCommand is the command a host operator runs once to join node name
// (pool, join code) to the control plane at controlURL, as kecectl and the
// console print it (docs/operations.md, "Judge host").
func JoinCommand(controlURL, pool, name, code string) string {
	return "kece-node join --control-url " + controlURL + " --pool " + pool + " --join-code " + code +
		" --credential-file " + NodeCredentialFile(name)
}

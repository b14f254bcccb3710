// Command veclane-agent is the node agent: it keeps its node's veclane daemon in step with
// the cluster's state in etcd. Its command line is package cli's, its logic package agent's.
package main

import (
	"os"

	"veclane.dev/cni/agent/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }

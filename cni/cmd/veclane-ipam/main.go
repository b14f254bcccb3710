// Command veclane-ipam is the CNI IPAM plugin that hands out a veclane network's addresses
// from etcd; its logic is package ipamplugin's.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"veclane.dev/cni/ipamplugin"
)

func main() { skel.PluginMainFuncs(ipamplugin.Funcs, ipamplugin.Versions, ipamplugin.About) }

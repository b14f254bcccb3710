// Command veclane-cni is the CNI plugin that gives a pod an interface on a veclane network;
// its logic is package plugin's.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"veclane.dev/cni/plugin"
)

func main() { skel.PluginMainFuncs(plugin.Funcs, plugin.Versions, plugin.About) }

// Command veclane-k8s is built by scripts/build-k8s.sh, in a generated wrapper module that
// requires k8s.io/kubernetes. It is kube-apiserver, kube-controller-manager, kube-scheduler, kubelet or
// kubectl, depending on the name it is run by (a symlink), as each one's upstream main is.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	if name == "veclane-k8s" && len(os.Args) > 1 {
		name, os.Args = os.Args[1], os.Args[1:]
	}
	switch name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "veclane-k8s: run as kube-apiserver, kube-controller-manager, "+
			"kube-scheduler, kubelet or kubectl (a symlink, or the first argument), not %q\n", name)
		os.Exit(2)
	}
}

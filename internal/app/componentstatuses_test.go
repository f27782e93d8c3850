package app

import (
	"errors"
	"testing"

	"k8s.io/kubernetes/pkg/probe"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
)

// TestComponentStatuses: kube-apiserver's names; the server's own
// components answer as their /healthz once started, and a scheduler the
// server does not run is probed at kube-scheduler's port.
func TestComponentStatuses(t *testing.T) {
	type want struct {
		result probe.Result
		msg    string
		err    string
	}
	check := func(t *testing.T, name string, s componentstatus.Server, w want) {
		t.Helper()
		result, msg, err := s.DoServerCheck()
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		if result != w.result || msg != w.msg || errText != w.err {
			t.Errorf("%s: (%v, %q, %q), want (%v, %q, %q)", name, result, msg, errText, w.result, w.msg, w.err)
		}
	}

	c := newComponentStatuses(nil, true)
	servers := c.servers()
	if len(servers) != 3 || servers["scheduler"] == nil || servers["controller-manager"] == nil || servers["etcd-0"] == nil {
		t.Fatalf("servers %v, want scheduler, controller-manager and etcd-0", servers)
	}
	starting := want{probe.Failure, errStarting.Error(), ""}
	check(t, "scheduler before it starts", servers["scheduler"], starting)
	check(t, "controller-manager before it starts", servers["controller-manager"], starting)

	lost := errors.New("failed election to renew leadership on lease kube-scheduler")
	var schedulerHealth error
	c.setScheduler(func() error { return schedulerHealth })
	c.setControllerManager(func() error { return nil })
	servers = c.servers()
	check(t, "scheduler", servers["scheduler"], want{probe.Success, "ok", ""})
	check(t, "controller-manager", servers["controller-manager"], want{probe.Success, "ok", ""})
	schedulerHealth = lost
	check(t, "scheduler that lost its lease", servers["scheduler"], want{probe.Failure, lost.Error(), ""})

	// --disable-scheduler: kube-apiserver's probe of kube-scheduler.
	probed, ok := newComponentStatuses(nil, false).servers()["scheduler"].(*componentstatus.HttpServer)
	if !ok || probed.Addr != "127.0.0.1" || probed.Port != 10259 || probed.Path != "/healthz" || !probed.EnableHTTPS {
		t.Errorf("scheduler of a server without one: %#v, want an HTTPS probe of https://127.0.0.1:10259/healthz", probed)
	}
}

// TestControllerManagerHealthzWithoutWatchdog: no leader election check,
// healthy.
func TestControllerManagerHealthzWithoutWatchdog(t *testing.T) {
	if err := (&controllerManager{}).healthz(); err != nil {
		t.Errorf("healthz without a watchdog: %v", err)
	}
}

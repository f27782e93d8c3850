package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/kubernetes/pkg/probe"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// componentStatuses are the servers kube-apiserver's componentstatuses
// probes when they are read (`kubectl get componentstatuses`): the
// scheduler, the controller manager and the storage's etcd.
//
// The scheduler and the controller manager run in the server: each
// answers as its /healthz would, unhealthy when it leads but has not
// renewed its Lease in time (upstream's leader election watchdog). A
// scheduler the server does not run (--disable-scheduler: one of the
// user's own) is probed where kube-apiserver probes it,
// https://127.0.0.1:10259/healthz. etcd-0 is a read through the
// storage's client, as kube-apiserver's probe reads
// /registry/health.
type componentStatuses struct {
	etcd componentstatus.Server

	mu                           sync.Mutex
	scheduler, controllerManager componentstatus.Server
}

// newComponentStatuses probes etcd through client; the scheduler and the
// controller manager are starting until setScheduler and
// setControllerManager, or probed as kube-apiserver does when
// runsScheduler is false.
func newComponentStatuses(client *clientv3.Client, runsScheduler bool) *componentStatuses {
	c := &componentStatuses{
		etcd:              etcdStatus{client: client},
		scheduler:         inProcessComponent{},
		controllerManager: inProcessComponent{},
	}
	if !runsScheduler {
		c.scheduler = &componentstatus.HttpServer{EnableHTTPS: true, TLSConfig: &tls.Config{InsecureSkipVerify: true},
			Addr: "127.0.0.1", Port: kubeschedulerconfig.DefaultKubeSchedulerPort, Path: "/healthz"}
	}
	return c
}

// servers is the componentstatuses storage's list, kube-apiserver's names.
func (c *componentStatuses) servers() map[string]componentstatus.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return map[string]componentstatus.Server{
		"scheduler":          c.scheduler,
		"controller-manager": c.controllerManager,
		"etcd-0":             c.etcd,
	}
}

// setScheduler and setControllerManager give the running components'
// health checks.
func (c *componentStatuses) setScheduler(healthz func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scheduler = inProcessComponent{healthz: healthz}
}

func (c *componentStatuses) setControllerManager(healthz func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.controllerManager = inProcessComponent{healthz: healthz}
}

// errStarting is a component's state until the server has started it.
var errStarting = errors.New("starting: the server has not started it yet")

// inProcessComponent is a component of the server: healthy as its
// healthz says, "ok" as kube-scheduler's and kube-controller-manager's
// /healthz answer. A failure is the message, as upstream's HTTP probe
// gives a failed /healthz's body or the dial error.
type inProcessComponent struct{ healthz func() error }

func (c inProcessComponent) DoServerCheck() (probe.Result, string, error) {
	if c.healthz == nil {
		return probe.Failure, errStarting.Error(), nil
	}
	if err := c.healthz(); err != nil {
		return probe.Failure, err.Error(), nil
	}
	return probe.Success, "ok", nil
}

// etcdStatus reads the health key as kube-apiserver's etcd probe does,
// within its 20 s.
type etcdStatus struct{ client *clientv3.Client }

func (e etcdStatus) DoServerCheck() (probe.Result, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.client.Get(ctx, "/registry/health"); err != nil {
		return probe.Failure, "", fmt.Errorf("error getting data from etcd: %w", err)
	}
	return probe.Success, "ok", nil
}

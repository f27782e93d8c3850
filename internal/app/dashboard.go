package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/dashboard"
)

// RunDashboard runs `skiff dashboard`: the web page on 127.0.0.1 until
// SIGINT or SIGTERM.
func RunDashboard(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("skiff dashboard", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := genericclioptions.NewConfigFlags(false)
	kube.AddFlags(fs)
	port := fs.Int("port", 8001, "the port on 127.0.0.1 to serve the page at; 0 picks a free one")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "skiff dashboard: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cs, err := clientFromFlags(kube, 50)
	if err != nil {
		fmt.Fprintf(stderr, "skiff dashboard: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveDashboard(ctx, cs, *port, stdout); err != nil {
		fmt.Fprintf(stderr, "skiff dashboard: %v\n", err)
		return 1
	}
	return 0
}

func serveDashboard(ctx context.Context, cs kubernetes.Interface, port int, stdout io.Writer) error {
	// Loopback only: the page acts with the user's credentials.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	d := dashboard.New(cs)
	defer d.Shutdown()
	if err := d.Start(ctx, 30*time.Second); err != nil {
		ln.Close()
		return err
	}
	// Requests end with ctx: the page's event streams do not end by
	// themselves.
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(stdout, "skiff dashboard: http://%s/ (Ctrl-C stops it)\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

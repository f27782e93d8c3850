package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/journey"
)

// JourneyPluginName is the name under which kubectl runs skiff as its
// `kubectl journey` plugin.
const JourneyPluginName = "kubectl-journey"

const journeyUsage = `Usage:
  %[1]s pod/NAME [-n NAMESPACE]      the pod's timeline, and why it is not running yet
  %[1]s --summary [--since 10m]       where the time goes across recent pods (p50, p99)
  skiff journey --install-kubectl-plugin DIR
                                     link DIR/kubectl-journey to skiff, for 'kubectl journey'

The kubectl flags (--kubeconfig, --context, -n ...) apply. Without KUBECONFIG
or --kubeconfig, the local server's admin kubeconfig is used.

Flags:
`

// RunJourney runs `skiff journey` (or kubectl's `journey` plugin, when
// name is JourneyPluginName).
func RunJourney(name string, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := genericclioptions.NewConfigFlags(true)
	kube.AddFlags(fs)
	summary := fs.Bool("summary", false, "summarize the journeys of recent pods instead of telling one")
	since := fs.Duration("since", 10*time.Minute, "with --summary: the pods with a step this recent")
	install := fs.String("install-kubectl-plugin", "", "link DIR/kubectl-journey to this binary and exit")
	output := fs.StringP("output", "o", "", "json: print the story as JSON (diagnosis, headline, steps) instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(stderr, journeyUsage, name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *output != "" && *output != "json" {
		fmt.Fprintf(stderr, "%s: --output: only json is supported\n", name)
		return 2
	}
	if *install != "" {
		return installJourneyPlugin(*install, stdout, stderr)
	}
	cs, err := clientFromFlags(kube, 0)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	ns, _, err := kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if *summary {
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "%s: --summary takes no pod\n", name)
			return 2
		}
		allNamespaces := !fs.Changed("namespace")
		if allNamespaces {
			ns = ""
		}
		if err := printJourneySummary(ctx, cs, ns, time.Now().Add(-*since), stdout); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	podName, ok := strings.CutPrefix(fs.Arg(0), "pod/")
	if !ok {
		podName, ok = strings.CutPrefix(fs.Arg(0), "pods/")
	}
	if !ok && strings.Contains(fs.Arg(0), "/") {
		fmt.Fprintf(stderr, "%s: %q: only pods have a journey (pod/NAME)\n", name, fs.Arg(0))
		return 2
	}
	if !ok {
		podName = fs.Arg(0)
	}
	if err := printJourney(ctx, cs, ns, podName, *output == "json", stdout); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// clientFromFlags is a client for kubectl's flags, which default, when
// neither KUBECONFIG nor --kubeconfig is set, to the local server's admin
// kubeconfig (as `skiff kubectl` does). qps 0 keeps client-go's limits.
func clientFromFlags(kube *genericclioptions.ConfigFlags, qps float32) (kubernetes.Interface, error) {
	if *kube.KubeConfig == "" && os.Getenv("KUBECONFIG") == "" {
		local := filepath.Join(DefaultDataDir(), "kubeconfig.yaml")
		if _, err := os.Stat(local); err == nil {
			*kube.KubeConfig = local
		}
	}
	rc, err := kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if qps > 0 {
		rc.QPS, rc.Burst = qps, int(2*qps)
	}
	return kubernetes.NewForConfig(rc)
}

// printJourney prints a pod's diagnosis (when it is not Running and
// Ready), its headline and its timeline.
func printJourney(ctx context.Context, cs kubernetes.Interface, namespace, name string, asJSON bool, out io.Writer) error {
	st, err := journey.Read(ctx, cs, namespace, name)
	if err != nil {
		return err
	}
	var room []journey.NodeRoom
	if st.Pod.Spec.NodeName == "" {
		room, _ = journey.ReadRoom(ctx, cs) // without it, the diagnosis leaves out the room
	}
	diagnosis := st.Diagnose(room)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(journeyJSON{Diagnosis: diagnosis, Headline: st.Headline(), Fallback: st.Fallback, Steps: st.Journey.Steps, Waiting: st.Journey.Waiting})
	}
	if diagnosis != "" {
		fmt.Fprintln(out, diagnosis)
	}
	fmt.Fprintln(out, st.Headline())
	if len(st.Fallback) > 0 {
		fmt.Fprintf(out, "(no record from the %s: those steps come from the pod and its events, to the second)\n", strings.Join(st.Fallback, " or the "))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for _, row := range st.Timeline() {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// journeyJSON is `skiff journey -o json`'s output.
type journeyJSON struct {
	Diagnosis string           `json:"diagnosis,omitempty"`
	Headline  string           `json:"headline"`
	Fallback  []string         `json:"fallback,omitempty"`
	Steps     []journey.Step   `json:"steps"`
	Waiting   *journey.Waiting `json:"waiting,omitempty"`
}

func printJourneySummary(ctx context.Context, cs kubernetes.Interface, namespace string, since time.Time, out io.Writer) error {
	pods, err := journey.List(ctx, cs, namespace, since)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d pods with a step since %s\n\n", len(pods), since.Local().Format("15:04:05"))
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SEGMENT\tPODS\tP50\tP99")
	for _, r := range journey.Summarize(pods) {
		p50, p99 := "-", "-"
		if r.Count > 0 {
			p50, p99 = journey.Ms(r.P50), journey.Ms(r.P99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Segment, r.Count, p50, p99)
	}
	return tw.Flush()
}

// installJourneyPlugin links dir/kubectl-journey to the running binary.
func installJourneyPlugin(dir string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		fmt.Fprintf(stderr, "skiff journey: finding this binary: %v\n", err)
		return 1
	}
	link := filepath.Join(dir, JourneyPluginName)
	if cur, err := os.Readlink(link); err == nil && cur == self {
		fmt.Fprintf(stdout, "%s already links to %s\n", link, self)
		return 0
	}
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(stderr, "skiff journey: %v\n", err)
		return 1
	}
	if err := os.Symlink(self, link); err != nil {
		fmt.Fprintf(stderr, "skiff journey: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "linked %s -> %s; 'kubectl journey pod/NAME' works when %s is on PATH\n", link, self, dir)
	return 0
}

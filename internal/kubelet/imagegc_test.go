package kubelet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
)

func TestImageGCPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*ImageGCPolicy)
		wantErr string
	}{
		{name: "default", change: func(*ImageGCPolicy) {}},
		{name: "high 100 disables collection", change: func(p *ImageGCPolicy) { p.HighThresholdPercent = 100 }},
		{name: "high over 100", change: func(p *ImageGCPolicy) { p.HighThresholdPercent = 101 },
			wantErr: "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"},
		{name: "low negative", change: func(p *ImageGCPolicy) { p.LowThresholdPercent = -1 },
			wantErr: "imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive"},
		{name: "low not below high", change: func(p *ImageGCPolicy) { p.LowThresholdPercent = 85 },
			wantErr: "imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85"},
		{name: "negative age", change: func(p *ImageGCPolicy) { p.MinAge = -time.Second },
			wantErr: "imageMinimumGCAge (--image-minimum-gc-age) -1s must not be negative"},
		{name: "no period", change: func(p *ImageGCPolicy) { p.Period = 0 },
			wantErr: "image GC period (--image-gc-period) 0s must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultImageGCPolicy()
			tt.change(&p)
			err := p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestCollectImages runs passes of image garbage collection over a fake
// runtime whose image filesystem holds 1,000 bytes, 500 of them taken by
// other files, and checks which images remain and which events the Node
// got.
func TestCollectImages(t *testing.T) {
	const capacity, otherUsed = 1000, 500
	type image struct {
		ref  string
		size uint64
		// age is how long before the collecting pass the image was first
		// detected (0: it appears in the collecting pass).
		age time.Duration
		// usedAgo, when set, is how long before the pass a container last
		// used it; inUse means a container uses it in the pass.
		usedAgo time.Duration
		inUse   bool
	}
	tests := []struct {
		name   string
		policy ImageGCPolicy
		images []image
		pinned []string
		// zeroCapacity makes the filesystem report no capacity at all.
		zeroCapacity bool
		wantLeft     []string
		wantEvents   []string
	}{
		{
			name:   "below the high threshold nothing goes",
			policy: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute, Period: time.Minute},
			images: []image{
				{ref: "a:1", size: 100, age: time.Hour},
				{ref: "b:1", size: 100, age: time.Hour},
			}, // 700/1000 = 70%
			wantLeft: []string{"a:1", "b:1"},
		},
		{
			name:   "over the high threshold the least recently used go down to the low threshold",
			policy: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute, Period: time.Minute},
			images: []image{
				{ref: "old:1", size: 100, age: time.Hour, usedAgo: 50 * time.Minute},
				{ref: "newer:1", size: 100, age: time.Hour, usedAgo: 10 * time.Minute},
				{ref: "never:1", size: 60, age: time.Hour},
				{ref: "running:1", size: 100, age: time.Hour, inUse: true},
			}, // 860/1000 = 86%: free 60 to reach 800: "never" (never used) is enough
			wantLeft: []string{"newer:1", "old:1", "running:1"},
		},
		{
			name:   "least recently used first, until enough is freed",
			policy: ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 70, MinAge: time.Minute, Period: time.Minute},
			images: []image{
				{ref: "old:1", size: 100, age: time.Hour, usedAgo: 50 * time.Minute},
				{ref: "newer:1", size: 100, age: time.Hour, usedAgo: 10 * time.Minute},
				{ref: "never:1", size: 60, age: time.Hour},
				{ref: "running:1", size: 100, age: time.Hour, inUse: true},
			}, // 86%, free 160 to reach 700: "never" then "old"
			wantLeft: []string{"newer:1", "running:1"},
		},
		{
			name:   "in use, pinned and young images stay, and the node is told",
			policy: ImageGCPolicy{HighThresholdPercent: 50, LowThresholdPercent: 10, MinAge: time.Minute, Period: time.Minute},
			images: []image{
				{ref: "pause:3.10", size: 10, age: time.Hour},
				{ref: "young:1", size: 100, age: 30 * time.Second},
				{ref: "fresh:1", size: 100},
				{ref: "running:1", size: 100, age: time.Hour, inUse: true},
				{ref: "unused:1", size: 40, age: time.Hour, usedAgo: time.Hour},
			},
			pinned:   []string{"docker.io/library/pause:3.10"},
			wantLeft: []string{"fresh:1", "pause:3.10", "running:1", "young:1"},
			// 850/1000 used; to reach 10% usage 750 must go, only "unused" may.
			wantEvents: []string{"Warning FreeDiskSpaceFailed Failed to garbage collect required amount of images. Attempted to free 750 bytes, but only found 40 bytes eligible to free."},
		},
		{
			name:         "a filesystem of no capacity is reported",
			policy:       DefaultImageGCPolicy(),
			images:       []image{{ref: "a:1", size: 100, age: time.Hour}},
			zeroCapacity: true,
			wantLeft:     []string{"a:1"},
			wantEvents:   []string{"Warning InvalidDiskCapacity invalid capacity 0 on image filesystem"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := testingclock.NewFakeClock(start)
			rt := fakeruntime.New(fakeruntime.Options{Clock: clk})
			fsCapacity := uint64(capacity)
			if tt.zeroCapacity {
				fsCapacity = 0
			}
			k, err := New(Config{NodeName: "n1", Client: fake.NewClientset(), Runtime: rt, Images: rt, DataDir: t.TempDir(),
				Clock: clk, ImageGC: &tt.policy, PinnedImages: tt.pinned,
				ImageFsStat: func(mountpoint string) (uint64, uint64, error) {
					info, err := rt.ImageFsInfo(ctx)
					if err != nil {
						return 0, 0, err
					}
					used := info.ImageFilesystems[0].UsedBytes.Value + otherUsed
					return fsCapacity, fsCapacity - min(used, fsCapacity), nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			events := record.NewFakeRecorder(10)
			k.recorder = events

			// Replay the images' history oldest first: appear, be used by
			// a container for a moment, and finally the collecting pass.
			type step struct {
				at  time.Time
				run func()
			}
			var steps []step
			sandbox, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "default"}}, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, img := range tt.images {
				steps = append(steps, step{start.Add(2*time.Hour - img.age), func() { rt.LoadImage(img.ref, img.size) }})
				if img.usedAgo > 0 {
					steps = append(steps, step{start.Add(2*time.Hour - img.usedAgo), func() {
						id, err := rt.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
							Metadata: &runtimeapi.ContainerMetadata{Name: "used"}, Image: &runtimeapi.ImageSpec{Image: img.ref}}, nil)
						if err != nil {
							t.Fatal(err)
						}
						if err := k.detectImages(ctx, clk.Now()); err != nil {
							t.Fatal(err)
						}
						if err := rt.RemoveContainer(ctx, id); err != nil {
							t.Fatal(err)
						}
					}})
				}
				if img.inUse {
					steps = append(steps, step{start.Add(2 * time.Hour), func() {
						if _, err := rt.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
							Metadata: &runtimeapi.ContainerMetadata{Name: "running"}, Image: &runtimeapi.ImageSpec{Image: img.ref}}, nil); err != nil {
							t.Fatal(err)
						}
					}})
				}
			}
			slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
			for _, s := range steps {
				clk.SetTime(s.at)
				s.run()
				if err := k.detectImages(ctx, clk.Now()); err != nil {
					t.Fatal(err)
				}
			}
			clk.SetTime(start.Add(2 * time.Hour))
			err = k.collectImages(ctx)
			if (err != nil) != (len(tt.wantEvents) > 0) {
				t.Errorf("collectImages() = %v", err)
			}

			left, err := rt.ListImages(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, img := range left {
				got = append(got, strings.TrimPrefix(img.RepoTags[0], "docker.io/library/"))
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantLeft) {
				t.Errorf("images left = %v, want %v", got, tt.wantLeft)
			}
			var gotEvents []string
			for len(events.Events) > 0 {
				gotEvents = append(gotEvents, <-events.Events)
			}
			if !slices.Equal(gotEvents, tt.wantEvents) {
				t.Errorf("events = %q, want %q", gotEvents, tt.wantEvents)
			}
		})
	}
}

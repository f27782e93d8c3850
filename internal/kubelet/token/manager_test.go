package token

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// issued is a TokenRequest response for a token of ttl issued at iat.
func issued(iat time.Time, ttl time.Duration) *authenticationv1.TokenRequest {
	secs := int64(ttl / time.Second)
	return &authenticationv1.TokenRequest{
		Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
		Status: authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(iat.Add(ttl))},
	}
}

func TestNeedsRefresh(t *testing.T) {
	tests := []struct {
		name   string
		tr     *authenticationv1.TokenRequest
		now    time.Time
		jitter time.Duration
		want   bool
	}{
		{name: "fresh", tr: issued(t0, time.Hour), now: t0, want: false},
		{name: "79% of an hour", tr: issued(t0, time.Hour), now: t0.Add(47*time.Minute + 24*time.Second), want: false},
		{name: "just past 80% of an hour", tr: issued(t0, time.Hour), now: t0.Add(48*time.Minute + time.Second), want: true},
		{name: "the kubelet's 3607 s at 80%", tr: issued(t0, 3607*time.Second), now: t0.Add(2886 * time.Second), want: true},
		{name: "jitter renews earlier", tr: issued(t0, time.Hour), now: t0.Add(47*time.Minute + 55*time.Second), jitter: 10 * time.Second, want: true},
		{name: "expired", tr: issued(t0, time.Hour), now: t0.Add(2 * time.Hour), want: true},
		{name: "a week-long token within its first day", tr: issued(t0, 7*24*time.Hour), now: t0.Add(23 * time.Hour), want: false},
		{name: "a week-long token after 24 hours", tr: issued(t0, 7*24*time.Hour), now: t0.Add(24*time.Hour + time.Second), want: true},
		{name: "no lifetime in the spec", tr: &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(t0)}},
			now: t0.Add(time.Hour), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsRefresh(tt.tr, tt.now, tt.jitter); got != tt.want {
				t.Errorf("NeedsRefresh = %t, want %t", got, tt.want)
			}
		})
	}
}

// fakeAPI answers TokenRequests with numbered tokens of the lifetime asked
// for, issued at the clock's time, or fails while err is set.
type fakeAPI struct {
	clock *testclock.FakeClock
	err   error
	calls int
}

func (f *fakeAPI) request(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := tr.DeepCopy()
	out.Status.Token = fmt.Sprintf("%s/%s#%d", namespace, name, f.calls)
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func podToken(pod types.UID, audiences ...string) *authenticationv1.TokenRequest {
	secs := int64(3607)
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         audiences,
		ExpirationSeconds: &secs,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod},
	}}
}

// TestManager walks one token through its life: cached, renewed after
// 80% of it, kept while a renewal fails, an error once expired; and
// checks keys and Forget.
func TestManager(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	api := &fakeAPI{clock: clk}
	m, err := New(Config{Request: api.request, Clock: clk, Jitter: func() time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type step struct {
		name      string
		advance   time.Duration
		apiErr    error
		req       *authenticationv1.TokenRequest
		forget    types.UID
		wantToken string
		wantErr   string
		wantCalls int
	}
	steps := []step{
		{name: "first use asks", req: podToken("p1"), wantToken: "team/builder#1", wantCalls: 1},
		{name: "reused at 50%", advance: 1800 * time.Second, req: podToken("p1"), wantToken: "team/builder#1", wantCalls: 1},
		{name: "another audience is another token", req: podToken("p1", "vault"), wantToken: "team/builder#2", wantCalls: 2},
		{name: "another pod is another token", req: podToken("p2"), wantToken: "team/builder#3", wantCalls: 3},
		{name: "renewed past 80%", advance: 1100 * time.Second, req: podToken("p1"), wantToken: "team/builder#4", wantCalls: 4},
		{name: "renewal failing keeps the valid token", advance: 2900 * time.Second, apiErr: errors.New("connection refused"),
			req: podToken("p1"), wantToken: "team/builder#4", wantCalls: 5},
		{name: "expired and renewal failing is an error", advance: 800 * time.Second, apiErr: errors.New("connection refused"),
			req: podToken("p1"), wantErr: "expired and refresh failed: connection refused", wantCalls: 6},
		{name: "renewed once the API answers", req: podToken("p1"), wantToken: "team/builder#7", wantCalls: 7},
		{name: "first use failing", req: podToken("p3"), apiErr: errors.New("serviceaccounts \"builder\" not found"),
			wantErr: "failed to fetch token: serviceaccounts \"builder\" not found", wantCalls: 8},
		{name: "forgotten pod asks again", forget: "p1", req: podToken("p1"), wantToken: "team/builder#9", wantCalls: 9},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		api.err = s.apiErr
		if s.forget != "" {
			m.Forget(s.forget)
		}
		got, err := m.Get(ctx, "team", "builder", s.req)
		switch {
		case s.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Fatalf("%s: err = %v, want %q", s.name, err, s.wantErr)
			}
		case err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case got.Status.Token != s.wantToken:
			t.Fatalf("%s: token %q, want %q", s.name, got.Status.Token, s.wantToken)
		}
		if api.calls != s.wantCalls {
			t.Fatalf("%s: %d requests, want %d", s.name, api.calls, s.wantCalls)
		}
	}
}

// TestManagerPrunesExpired checks that tokens of pods never forgotten do
// not stay forever.
func TestManagerPrunesExpired(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	api := &fakeAPI{clock: clk}
	m, err := New(Config{Request: api.request, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"a", "b", "c"} {
		if _, err := m.Get(context.Background(), "team", "builder", podToken(uid)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(2 * time.Hour)
	if _, err := m.Get(context.Background(), "team", "builder", podToken("d")); err != nil {
		t.Fatal(err)
	}
	if n := len(m.cache); n != 1 {
		t.Errorf("%d tokens cached after the others expired, want 1", n)
	}
}

func TestNewRequiresRequest(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without Request succeeded")
	}
}

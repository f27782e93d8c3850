package app

import (
	"slices"
	"strings"
	"testing"
)

func TestAdmissionPlugins(t *testing.T) {
	defaults, err := admissionPlugins(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "Priority", "PodSecurity", "ResourceQuota", "ValidatingAdmissionPolicy"} {
		if !slices.Contains(defaults, want) {
			t.Errorf("default chain %v lacks %s", defaults, want)
		}
	}
	for _, off := range []string{"AlwaysPullImages", "TaintNodesByCondition", "ValidatingAdmissionWebhook"} {
		if slices.Contains(defaults, off) {
			t.Errorf("default chain runs %s", off)
		}
	}
	tests := []struct {
		name            string
		enable, disable []string
		wantIn, wantOut []string
		wantErr         string
	}{
		{name: "disable", disable: []string{"ServiceAccount", "Priority"}, wantOut: []string{"ServiceAccount", "Priority"}, wantIn: []string{"LimitRanger"}},
		{name: "enable default-off", enable: []string{"AlwaysPullImages"}, wantIn: []string{"AlwaysPullImages", "ServiceAccount"}},
		{name: "enable one skiff leaves off", enable: []string{"TaintNodesByCondition"}, wantIn: []string{"TaintNodesByCondition"}},
		{name: "unknown", enable: []string{"NoSuchPlugin"}, wantErr: `"NoSuchPlugin" is unknown`},
		{name: "unknown disabled", disable: []string{"serviceaccount"}, wantErr: `"serviceaccount" is unknown`},
		{name: "both", enable: []string{"Priority"}, disable: []string{"Priority"}, wantErr: "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := admissionPlugins(tt.enable, tt.disable)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.wantIn {
				if !slices.Contains(got, n) {
					t.Errorf("%v lacks %s", got, n)
				}
			}
			for _, n := range tt.wantOut {
				if slices.Contains(got, n) {
					t.Errorf("%v runs %s", got, n)
				}
			}
			// kube-apiserver's order, whatever the flags' order.
			if i, j := slices.Index(got, "AlwaysPullImages"), slices.Index(got, "NamespaceLifecycle"); i >= 0 && j >= 0 && i < j {
				t.Errorf("order %v: AlwaysPullImages before NamespaceLifecycle", got)
			}
		})
	}
}

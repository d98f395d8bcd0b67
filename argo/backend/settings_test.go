package backend

import (
	"strings"
	"testing"
)

func TestSettingsDefaults(t *testing.T) {
	s, err := parseSettings(map[string]string{"url": "https://argo-results.argo.svc:8443"})
	if err != nil {
		t.Fatal(err)
	}
	if s.tokenFile != "/var/run/secrets/argo-results/token" || s.audience != "argo-results" || s.expirationSeconds != 600 {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestSettingsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		raw  map[string]string
		want string
	}{
		"no url":          {map[string]string{}, "url is required"},
		"unknown key":     {map[string]string{"url": "u", "URL": "u"}, `unknown setting "URL"`},
		"short token":     {map[string]string{"url": "u", "expirationSeconds": "599"}, "at least 600"},
		"not a number":    {map[string]string{"url": "u", "expirationSeconds": "10m"}, "whole number"},
		"negative tokens": {map[string]string{"url": "u", "expirationSeconds": "-1"}, "at least 600"},
		"retry for ever":  {map[string]string{"url": "u", "retryFor": "0s"}, "retryFor \"0s\": a duration of at least 1s"},
		"retry in number": {map[string]string{"url": "u", "retryFor": "300"}, "a duration of at least 1s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseSettings(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

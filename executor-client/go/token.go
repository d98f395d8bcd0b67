package argoresults

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// TokenSource gives the bearer token to send with one attempt; "" sends none.
type TokenSource func() (string, error)

// TokenFile reads the token from path before every attempt, because the kubelet rotates
// projected service-account tokens in place.
func TokenFile(path string) TokenSource {
	return func() (string, error) {
		text, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the token file: %w", err)
		}
		return strings.TrimSpace(string(text)), nil
	}
}

// StaticToken sends the same token with every attempt.
func StaticToken(token string) TokenSource {
	return func() (string, error) { return token, nil }
}

// TokenNamespace is the namespace a service-account token names (kubernetes.io.namespace),
// read without verification: only the server's check of the token matters.
func TokenNamespace(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var claims struct {
		Kubernetes *struct {
			Namespace string `json:"namespace"`
		} `json:"kubernetes.io"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Kubernetes == nil || claims.Kubernetes.Namespace == "" {
		return "", false
	}
	return claims.Kubernetes.Namespace, true
}

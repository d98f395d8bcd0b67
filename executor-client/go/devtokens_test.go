package argoresults

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"time"
)

// Tokens signed by a dev-auth server's key (argo-results-dev-key.pem in its data
// directory), shaped as proto/src/token.rs mints them: ES256, kid argo-results-dev, issuer
// argo-results-dev, audience argo-results.

const (
	devKeyFile     = "argo-results-dev-key.pem"
	devKeyID       = "argo-results-dev"
	devIssuer      = "argo-results-dev"
	devAdmin       = "argo-results:dev-admin"
	serviceAccount = "default"
)

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

type kubernetesClaims struct {
	Namespace      string     `json:"namespace"`
	Pod            *objectRef `json:"pod,omitempty"`
	ServiceAccount *objectRef `json:"serviceaccount,omitempty"`
}

type tokenClaims struct {
	Iss        string            `json:"iss"`
	Sub        string            `json:"sub"`
	Aud        []string          `json:"aud"`
	Exp        int64             `json:"exp"`
	Iat        int64             `json:"iat"`
	Nbf        int64             `json:"nbf"`
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`
}

func userClaims(subject string) tokenClaims {
	now := time.Now().Unix()
	return tokenClaims{Iss: devIssuer, Sub: subject, Aud: []string{"argo-results"}, Exp: now + 3600, Iat: now, Nbf: now}
}

func adminClaims() tokenClaims { return userClaims(devAdmin) }

// podClaims are a projected token's claims for pod (name, uid) in namespace.
func podClaims(namespace, podName, podUID string) tokenClaims {
	claims := userClaims("system:serviceaccount:" + namespace + ":" + serviceAccount)
	claims.Kubernetes = &kubernetesClaims{
		Namespace:      namespace,
		Pod:            &objectRef{Name: podName, UID: podUID},
		ServiceAccount: &objectRef{Name: serviceAccount, UID: namespace + "-" + serviceAccount},
	}
	return claims
}

// mint signs claims with the server's dev key.
func (s *testServer) mint(claims tokenClaims) string {
	s.t.Helper()
	text, err := os.ReadFile(filepath.Join(s.dir, devKeyFile))
	if err != nil {
		s.t.Fatalf("the dev key: %v", err)
	}
	block, _ := pem.Decode(text)
	if block == nil {
		s.t.Fatal("the dev key is not PEM")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		s.t.Fatalf("the dev key: %v", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		s.t.Fatalf("the dev key is a %T, not EC", parsed)
	}
	encode := func(value any) string {
		data, err := json.Marshal(value)
		if err != nil {
			s.t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signed := encode(map[string]string{"alg": "ES256", "typ": "JWT", "kid": devKeyID}) + "." + encode(claims)
	digest := sha256.Sum256([]byte(signed))
	r, sig, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		s.t.Fatal(err)
	}
	// JWS ES256: r and s, each 32 bytes big-endian.
	signature := make([]byte, 64)
	r.FillBytes(signature[:32])
	sig.FillBytes(signature[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(signature)
}

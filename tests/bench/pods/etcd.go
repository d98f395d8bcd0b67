package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// etcdGateway is etcd's JSON gateway to its KV API (keys and values in base64, as
// encoding/json writes a []byte): enough to seed results without etcd's gRPC client.
type etcdGateway struct{ url string }

type etcdPut struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

func (e etcdGateway) call(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	request, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	if err != nil {
		return err
	}
	if response.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, response.Status, answer)
	}
	return json.Unmarshal(answer, out)
}

// get is the value of key.
func (e etcdGateway) get(ctx context.Context, key string) ([]byte, error) {
	var answer struct {
		KVs []etcdPut `json:"kvs"`
	}
	if err := e.call(ctx, "/v3/kv/range", map[string][]byte{"key": []byte(key)}, &answer); err != nil {
		return nil, err
	}
	if len(answer.KVs) == 0 {
		return nil, fmt.Errorf("etcd holds no %s", key)
	}
	return answer.KVs[0].Value, nil
}

// txn writes puts in one transaction.
func (e etcdGateway) txn(ctx context.Context, puts []etcdPut) error {
	type operation struct {
		RequestPut etcdPut `json:"requestPut"`
	}
	operations := make([]operation, len(puts))
	for i, put := range puts {
		operations[i] = operation{RequestPut: put}
	}
	var answer struct {
		Succeeded bool `json:"succeeded"`
	}
	if err := e.call(ctx, "/v3/kv/txn", map[string]any{"success": operations}, &answer); err != nil {
		return err
	}
	if !answer.Succeeded {
		return fmt.Errorf("etcd refused a transaction of %d puts", len(puts))
	}
	return nil
}

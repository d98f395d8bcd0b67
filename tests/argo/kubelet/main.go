// Command kubelet is a kubelet stand-in for the tests of Argo itself: on the tests' real
// kube-apiserver (tests/kube), it schedules every Pod to its one Node and runs the Pod's
// containers as processes on this host, as root, each in a mount and a PID namespace of
// its own where the Pod's volumes are bind-mounted at their paths. It reports phase, container
// states, exit codes and termination messages through the Pod's status, as a kubelet does.
//
// What differs from a kubelet:
//   - no images: a container runs its command on the host; `argoexec` (Argo's executor
//     image's entrypoint) is the binary given by --argoexec; a container without a
//     command is refused (an image's entrypoint is unknown here);
//   - no network or IPC namespace, cgroups, resource limits, probes, restarts (every Pod is
//     treated as restartPolicy Never, as Argo's are), or logs through the API (each
//     container's output is in ROOT/<pod UID>/<container>.log);
//   - volumes: emptyDir, hostPath, configMap, secret, and projected (service-account
//     tokens from the TokenRequest API bound to the Pod, configMaps, the downward API);
//     the kube-root-ca.crt ConfigMap, which a controller manager publishes, is the
//     cluster's CA read from --ca; tokens are not renewed while a Pod runs;
//   - faults on demand, by annotation on the Pod (a workflow sets them through a
//     template's metadata): kubelet.argo-results.test/pending ("true": never started),
//     .../evict ("true": evicted as for node pressure: containers killed, phase Failed,
//     reason Evicted), .../kill (a container's name: SIGKILL to it), .../reject (a
//     reason such as OutOfcpu: refused at admission as a kubelet refuses a Pod that does
//     not fit, phase Failed before any container ran, no container statuses),
//     .../oom-at-exit (a container's name: reported OOMKilled, exit code 137, as it
//     ends, whatever its own exit: a container killed after it did all it does),
//     .../apiserver (HOST:PORT: the API server's address the Pod's containers are given,
//     a proxy the test can stop).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const annotationPrefix = "kubelet.argo-results.test/"

type kubelet struct {
	client   kubernetes.Interface
	node     string
	root     string
	argoexec string
	ca       []byte
	// The API server as pods reach it (KUBERNETES_SERVICE_HOST and _PORT).
	host, port string
	self       string

	mu   sync.Mutex
	pods map[types.UID]*podRunner
	// Pods asked to bind or to finish deleting, and Pods rejected: each is acted on once.
	bound, deleted, rejected map[types.UID]bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "container" {
		err := runContainer(os.Args[2:])
		fmt.Fprintf(os.Stderr, "kubelet container: %v\n", err)
		os.Exit(127)
	}
	kubeconfig := flag.String("kubeconfig", "", "the admin kubeconfig of the API server")
	node := flag.String("node", "argo-results-test-node", "the Node this kubelet is")
	root := flag.String("root", "", "where pods' volumes and logs live (required)")
	argoexec := flag.String("argoexec", "", "the argoexec binary that stands for Argo's executor image (required)")
	ca := flag.String("ca", "", "the cluster's CA certificate, for pods' kube-root-ca.crt (required)")
	flag.Parse()
	if *root == "" || *argoexec == "" || *ca == "" || *kubeconfig == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*kubeconfig, *node, *root, *argoexec, *ca); err != nil {
		log.Fatal(err)
	}
}

func run(kubeconfig, node, root, argoexec, caFile string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	u, err := parseServer(config.Host)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	k := &kubelet{
		client: kubernetes.NewForConfigOrDie(config), node: node, root: root,
		argoexec: argoexec, ca: ca, host: u.host, port: u.port, self: self,
		pods: map[types.UID]*podRunner{}, bound: map[types.UID]bool{}, deleted: map[types.UID]bool{},
		rejected: map[types.UID]bool{},
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := k.registerNode(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(k.client, 0)
	pods := factory.Core().V1().Pods().Informer()
	_, err = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(ctx, obj.(*apiv1.Pod)) },
		UpdateFunc: func(_, obj any) { k.sync(ctx, obj.(*apiv1.Pod)) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	log.Printf("kubelet stand-in: node %s, pods in %s", node, root)
	<-ctx.Done()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.pods {
		r.kill(syscall.SIGKILL)
	}
	return nil
}

// registerNode makes this kubelet's Node, Ready, as a kubelet registers itself.
func (k *kubelet) registerNode(ctx context.Context) error {
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.node}}
	_, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	got, err := k.client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Status.Conditions = []apiv1.NodeCondition{{
		Type: apiv1.NodeReady, Status: apiv1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
	return err
}

// sync does what one Pod's latest state asks: bind it, start it, apply a fault, or finish
// its deletion.
func (k *kubelet) sync(ctx context.Context, pod *apiv1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	uid := pod.UID
	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp == nil && !k.bound[uid] {
			k.bound[uid] = true
			go k.bind(ctx, pod)
		}
		return
	}
	if pod.Spec.NodeName != k.node {
		return
	}
	runner := k.pods[uid]
	if pod.DeletionTimestamp != nil {
		if !k.deleted[uid] {
			k.deleted[uid] = true
			go k.finishDeletion(ctx, pod, runner)
		}
		return
	}
	terminal := pod.Status.Phase == apiv1.PodSucceeded || pod.Status.Phase == apiv1.PodFailed
	if reason := pod.Annotations[annotationPrefix+"reject"]; runner == nil && !terminal && reason != "" {
		if !k.rejected[uid] {
			k.rejected[uid] = true
			go newPodRunner(k, pod).reject(ctx, reason)
		}
		return
	}
	if runner == nil && !terminal && pod.Annotations[annotationPrefix+"pending"] != "true" {
		runner = newPodRunner(k, pod)
		k.pods[uid] = runner
		go runner.run(ctx)
	}
	if runner == nil {
		return
	}
	if pod.Annotations[annotationPrefix+"evict"] == "true" {
		go runner.evict(ctx)
	}
	if name := pod.Annotations[annotationPrefix+"kill"]; name != "" {
		runner.killContainer(name)
	}
}

// bind schedules the Pod to this node, as the scheduler would, through pods/binding.
func (k *kubelet) bind(ctx context.Context, pod *apiv1.Pod) {
	binding := &apiv1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     apiv1.ObjectReference{Kind: "Node", Name: k.node},
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		log.Printf("binding %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// finishDeletion stops a deleted Pod's containers within its grace period, then removes
// the Pod, as a kubelet confirms a deletion once its containers are gone.
func (k *kubelet) finishDeletion(ctx context.Context, pod *apiv1.Pod, runner *podRunner) {
	if runner != nil {
		grace := int64(30)
		if pod.DeletionGracePeriodSeconds != nil {
			grace = *pod.DeletionGracePeriodSeconds
		}
		runner.stop(grace)
	}
	zero := int64(0)
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Printf("deleting %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

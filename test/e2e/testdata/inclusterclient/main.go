// Command inclusterclient is what an e2e test runs in a pod to show that
// client-go's in-cluster configuration works there: it reaches the API
// server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT over TLS,
// trusting the mounted ca.crt, with the pod's service account token, and
// prints, a line each, who it is, the pods of its namespace (which its
// Role lets it list) and the answer to listing the namespace's Secrets.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		log.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Fatalf("whoami: %v", err)
	}
	fmt.Printf("user: %s\n", review.Status.UserInfo.Username)
	pods, err := cs.CoreV1().Pods(string(ns)).List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatalf("list pods: %v", err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	fmt.Printf("pods: %s\n", strings.Join(names, ","))
	_, err = cs.CoreV1().Secrets(string(ns)).List(ctx, metav1.ListOptions{})
	fmt.Printf("secrets: %s\n", apierrors.ReasonForError(err))
}

package proxytest

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// OpenWatch opens a server stream of method on cc and sends its one request
// message ("watch"), closing the sending side: the call the streaming tests
// of both h2 paths start with.
func OpenWatch(ctx context.Context, t *testing.T, cc *grpc.ClientConn, method string) grpc.ClientStream {
	t.Helper()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(wrapperspb.String("watch")); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return st
}

package locks_test

import (
	"fmt"

	"github.com/tabfence/tabfence/locks"
)

func ExampleName() {
	// The protocol version is in the name: after a deploy, tabs on v4
	// elect their own leader instead of following a v3 tab left open.
	old, _ := locks.Name("workspace-7", 3)
	cur, _ := locks.Name("workspace-7", 4)
	fmt.Println(old)
	fmt.Println(cur)
	_, err := locks.Name("bad\nscope", 4)
	fmt.Println(err)
	// Output:
	// tabfence:workspace-7:v3
	// tabfence:workspace-7:v4
	// locks: invalid lock name: control character in scope at byte 3
}

func ExampleOptions_Validate() {
	fmt.Println(locks.Options{Steal: true}.Validate())
	fmt.Println(locks.Options{Steal: true, IfAvailable: true}.Validate())
	// Output:
	// <nil>
	// locks: invalid lock options: steal and ifAvailable cannot be combined
}

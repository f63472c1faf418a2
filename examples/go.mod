module github.com/sourceip/sourceip/examples

go 1.26.0

replace github.com/sourceip/sourceip => ../

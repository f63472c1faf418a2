module github.com/sourceip/sourceip

go 1.26

package ranges

// Where the providers publish their lists and document them.
const (
	cloudflareV4URL = "https://www.cloudflare.com/ips-v4"
	cloudflareV6URL = "https://www.cloudflare.com/ips-v6"
	cloudflareDoc   = "https://www.cloudflare.com/ips/"

	awsURL  = "https://ip-ranges.amazonaws.com/ip-ranges.json"
	awsDoc1 = "https://docs.aws.amazon.com/vpc/latest/userguide/aws-ip-ranges.html"
	awsDoc2 = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/LocationsOfEdgeServers.html"

	googleCloudURL = "https://www.gstatic.com/ipranges/cloud.json"
	googleCloudDoc = "https://cloud.google.com/compute/docs/faq#find_ip_range"
	googleLBDoc1   = "https://cloud.google.com/load-balancing/docs/firewall-rules"
	googleLBDoc2   = "https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges"

	azureDownloadPage = "https://www.microsoft.com/en-us/download/details.aspx?id=56519"
	azureDoc1         = "https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview"
	azureDoc2         = "https://learn.microsoft.com/en-us/azure/frontdoor/origin-security"

	fastlyURL = "https://api.fastly.com/public-ip-list"
	fastlyDoc = "https://www.fastly.com/documentation/reference/api/utils/public-ip-list/"
)

output "cluster_name" {
  description = "EKS cluster name (aws eks update-kubeconfig --name <this>)."
  value       = aws_eks_cluster.this.name
}

output "cluster_endpoint" {
  description = "Kubernetes API endpoint."
  value       = aws_eks_cluster.this.endpoint
}

output "cluster_ca_certificate" {
  description = "Base64 CA certificate of the API endpoint."
  value       = aws_eks_cluster.this.certificate_authority[0].data
}

output "oidc_provider_arn" {
  description = "IAM OIDC provider of the cluster (IRSA)."
  value       = aws_iam_openid_connect_provider.this.arn
}

output "bucket_name" {
  description = "S3 bucket for Shoal payloads and results."
  value       = aws_s3_bucket.shoal.bucket
}

output "shoal_role_arn" {
  description = "IAM role the Shoal service account assumes (annotation eks.amazonaws.com/role-arn)."
  value       = aws_iam_role.shoal.arn
}

output "gpu_node_group" {
  description = "Name of the GPU spot node group (minimum 0)."
  value       = aws_eks_node_group.gpu.node_group_name
}

output "region" {
  description = "AWS region of the cluster and the bucket."
  value       = var.region
}

output "api_token" {
  description = "Bearer token of the Shoal gateway (Secret shoal-api-tokens): terraform output -raw api_token."
  value       = random_password.api_token.result
  sensitive   = true
}

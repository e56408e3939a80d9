# Example: Shoal on a new EKS cluster in an existing VPC.
#   terraform init && terraform apply -var vpc_id=vpc-... -var 'subnet_ids=["subnet-a","subnet-b"]'
terraform {
  required_version = ">= 1.5.0"
  required_providers {
    aws        = { source = "hashicorp/aws", version = ">= 5.40, < 7.0" }
    helm       = { source = "hashicorp/helm", version = ">= 2.12, < 3.0" }
    tls        = { source = "hashicorp/tls", version = ">= 4.0, < 5.0" }
    kubernetes = { source = "hashicorp/kubernetes", version = ">= 2.25, < 3.0" }
    random     = { source = "hashicorp/random", version = ">= 3.5, < 4.0" }
  }
}

variable "region" {
  description = "AWS region."
  type        = string
  default     = "eu-west-1"
}

variable "vpc_id" {
  description = "Existing VPC."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets in at least two availability zones."
  type        = list(string)
}

provider "aws" {
  region = var.region
}

data "aws_eks_cluster_auth" "this" {
  name = module.shoal.cluster_name
}

provider "helm" {
  kubernetes {
    host                   = module.shoal.cluster_endpoint
    cluster_ca_certificate = base64decode(module.shoal.cluster_ca_certificate)
    token                  = data.aws_eks_cluster_auth.this.token
  }
}

provider "kubernetes" {
  host                   = module.shoal.cluster_endpoint
  cluster_ca_certificate = base64decode(module.shoal.cluster_ca_certificate)
  token                  = data.aws_eks_cluster_auth.this.token
}

module "shoal" {
  source             = "../../modules/eks-shoal"
  name               = "shoal-demo"
  region             = var.region
  vpc_id             = var.vpc_id
  subnet_ids         = var.subnet_ids
  shoal_chart_path   = "${path.module}/../../../helm/shoal"
  shoal_values_files = ["${path.module}/../../../helm/shoal/values-aws.yaml"]
}

output "kubeconfig_command" {
  description = "Command that points kubectl at the new cluster."
  value       = "aws eks update-kubeconfig --region ${var.region} --name ${module.shoal.cluster_name}"
}

output "shoal_role_arn" {
  description = "IAM role of the Shoal pods."
  value       = module.shoal.shoal_role_arn
}

output "bucket_name" {
  description = "S3 bucket for payloads and results."
  value       = module.shoal.bucket_name
}

output "api_token" {
  description = "Bearer token of the gateway."
  value       = module.shoal.api_token
  sensitive   = true
}

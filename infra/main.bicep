// tabletalk on Azure: the whole stack in one deployment.
//
// Storage (the chat tables, the deployment package, dead letters), a Linux Function App on the
// Flex Consumption plan running the custom-handler binary, Key Vault for every secret the app
// reads (app settings are Key Vault references), a user-assigned identity with exactly the
// roles it needs (it reaches storage with Entra ID tokens, never an account key), the Event Grid topic message events go to and its subscription to the
// notification function, Web PubSub with the `chat` hub, and Application Insights.
//
// Deploy twice: first with createEventSubscription=false, then publish the code (the zip from
// `cargo package-app`), then again with createEventSubscription=true — Event Grid can only
// subscribe a function that already exists (see README.md).

targetScope = 'resourceGroup'

@description('Prefix for every resource name: letters, digits and hyphens.')
@minLength(3)
@maxLength(16)
param baseName string

@description('Region of every resource.')
param location string = resourceGroup().location

@description('Prefix for every table name (letters and digits), to share an account between deployments.')
param tablePrefix string = ''

@description('The serverId messageChanges accepts.')
param workspaceId string = 'default'

@description('JWKS URL of the identity provider whose RS256 tokens callers present.')
@minLength(1)
param jwksUrl string

// The app refuses to start with a JWKS URL but no issuer or audience: the provider's keys sign
// tokens for every application, and only these two make a token one for this app.
@description('Required iss of bearer tokens (e.g. https://login.microsoftonline.com/<tenant>/v2.0).')
@minLength(1)
param jwtIssuer string

@description('Required aud of bearer tokens: the app registration callers get tokens for.')
@minLength(1)
param jwtAudience string

@description('The VAPID private key for Web Push (base64url, 32 bytes): `tabletalk vapid-key` makes one. Written to Key Vault when given; leave it empty on later deployments so a key rotated in the vault is not overwritten.')
@secure()
param vapidPrivateKey string = ''

@description('The key outgoing webhooks\' signing secrets are sealed with (any long random string, e.g. `openssl rand -base64 32`). Written to Key Vault when given; leave it empty on later deployments: a changed key makes every stored secret unusable.')
@secure()
param webhookSealingKey string = ''

@description('The contact push services see in VAPID tokens (mailto: or https:).')
param vapidSubject string

@description('Seconds after joining a room during which a member is a newcomer there (trust level 0: a lower write rate; no @everyone, @here, links or files); 0: no newcomers.')
@minValue(0)
param newcomerSeconds int = 600

@description('The trust thresholds of levels 1, 2 and 3 as JSON (see docs/CONFIGURATION.md); empty: the defaults.')
param trustThresholds string = ''

@description('Largest attachment, in bytes (the upload route refuses a larger declared size).')
@minValue(1)
param attachmentMaxBytes int = 10485760

@description('Attachment types allowed, comma-separated.')
param attachmentTypes string = 'image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain'

@description('Origins whose pages may upload attachments straight to Blob Storage (CORS on the blob service).')
param attachmentOrigins array = ['*']

@description('Origins whose pages (the reference web client, functions/web/, hosted elsewhere) may call the API from a browser (CORS on the Functions app). Empty: none; the bearer token, not a cookie, carries the caller, so no credentials are allowed.')
param webClientOrigins array = []

@description('Web PubSub tier: Free_F1 for trying out, Standard_S1 for production.')
@allowed([
  'Free_F1'
  'Standard_S1'
])
param webPubSubSku string = 'Standard_S1'

@description('Most instances the app scales out to.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Memory per instance (MB).')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Create the Event Grid subscription to the notify function: false on the first pass, true once the code is deployed.')
param createEventSubscription bool = false

var tables = [
  'Messages'
  'MessagesAscending'
  'MessagesMetadata'
  'Rooms'
  'UserRooms'
  'Housekeeping'
  'PushSubscriptions'
  'UserHistory'
  'Limits'
  'Presence'
]
var hubName = 'chat'
var notifyFunction = 'notify'
var messageEventType = 'tabletalk.message.created'
// Names that are DNS names worldwide carry a suffix unique to the resource group.
var suffix = take(uniqueString(resourceGroup().id), 6)
var storageName = take(toLower(replace('${baseName}${uniqueString(resourceGroup().id)}', '-', '')), 24)
var vaultName = take('${baseName}-${uniqueString(resourceGroup().id)}', 24)
var deploymentContainer = 'deployment'
var deadLetterContainer = 'deadletter'
var attachmentsContainer = 'attachments'

// Built-in role definition ids.
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
}

// ---- The app's identity --------------------------------------------------------------------
// User-assigned, so its role assignments exist before the app starts: the app's Key Vault
// references and its first storage calls then succeed from the first start.

resource appIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: '${baseName}-app'
  location: location
}

// ---- Monitoring ---------------------------------------------------------------------------

resource logs 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: '${baseName}-logs'
  location: location
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource insights 'Microsoft.Insights/components@2020-02-02' = {
  name: '${baseName}-insights'
  location: location
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logs.id
  }
}

// ---- Storage: the tables, the deployment package, dead-lettered events -------------------

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: storageName
  location: location
  kind: 'StorageV2'
  sku: {
    name: 'Standard_ZRS'
  }
  properties: {
    minimumTlsVersion: 'TLS1_2'
    allowBlobPublicAccess: false
    supportsHttpsTrafficOnly: true
    defaultToOAuthAuthentication: true
  }
}

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource chatTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [
  for table in tables: {
    parent: tableService
    name: '${tablePrefix}${table}'
  }
]

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    // Browsers upload attachments straight to the container with a signed link.
    cors: {
      corsRules: [
        {
          allowedOrigins: attachmentOrigins
          allowedMethods: ['PUT', 'GET', 'HEAD']
          allowedHeaders: ['content-type', 'x-ms-blob-type', 'x-ms-version']
          exposedHeaders: ['content-disposition', 'content-length', 'content-type']
          maxAgeInSeconds: 3600
        }
      ]
    }
  }
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [
  for container in [
    deploymentContainer
    deadLetterContainer
    attachmentsContainer
  ]: {
    parent: blobService
    name: container
    properties: {
      publicAccess: 'None'
    }
  }
]

// ---- Live delivery: Web PubSub and its hub -----------------------------------------------

resource webPubSub 'Microsoft.SignalRService/webPubSub@2024-03-01' = {
  name: '${baseName}-live-${suffix}'
  location: location
  identity: {
    type: 'SystemAssigned'
  }
  sku: {
    name: webPubSubSku
    capacity: 1
  }
  properties: {
    // The app signs client and REST tokens with the access key.
    disableLocalAuth: false
  }
}

resource hub 'Microsoft.SignalRService/webPubSub/hubs@2024-03-01' = {
  parent: webPubSub
  name: hubName
  properties: {
    anonymousConnectPolicy: 'deny'
    // Presence: the service posts each client's connected and disconnected system events to
    // the app's liveEvents function (CloudEvents, abuse-protection preflight first). The
    // function is anonymous to the host: it checks each event's ce-signature, the HMAC of the
    // connection id with the hub's access key, and refuses a bad one with 401.
    eventHandlers: [
      {
        urlTemplate: 'https://${site.properties.defaultHostName}/api/live/events'
        userEventPattern: ''
        systemEvents: [
          'connected'
          'disconnected'
        ]
      }
    ]
  }
}

// ---- Message events: the Event Grid topic ------------------------------------------------

resource topic 'Microsoft.EventGrid/topics@2022-06-15' = {
  name: '${baseName}-events'
  location: location
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    inputSchema: 'CloudEventSchemaV1_0'
    // The app publishes with the topic key (aeg-sas-key).
    disableLocalAuth: false
  }
}

// ---- Secrets -------------------------------------------------------------------------------

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: vaultName
  location: location
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    enablePurgeProtection: true
  }
}

resource vapidSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(vapidPrivateKey)) {
  parent: vault
  name: 'vapid-private-key'
  properties: {
    value: vapidPrivateKey
    contentType: 'text/plain'
  }
}

resource sealingSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(webhookSealingKey)) {
  parent: vault
  name: 'webhook-sealing-key'
  properties: {
    value: webhookSealingKey
    contentType: 'text/plain'
  }
}

resource webPubSubSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'webpubsub-connection'
  properties: {
    value: webPubSub.listKeys().primaryConnectionString
    contentType: 'text/plain'
  }
}

resource topicSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'eventgrid-key'
  properties: {
    value: topic.listKeys().key1
    contentType: 'text/plain'
  }
}

// ---- The Function App --------------------------------------------------------------------

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: '${baseName}-plan'
  location: location
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: '${baseName}-func-${suffix}'
  location: location
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${appIdentity.id}': {}
    }
  }
  dependsOn: [
    storageRoles
    vaultRole
    containers
  ]
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    keyVaultReferenceIdentity: appIdentity.id
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainer}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: appIdentity.id
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'custom'
        version: '1.0'
      }
    }
    siteConfig: {
      cors: {
        allowedOrigins: webClientOrigins
        supportCredentials: false
      }
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      appSettings: [
        {
          name: 'AzureWebJobsStorage__accountName'
          value: storage.name
        }
        {
          name: 'AzureWebJobsStorage__credential'
          value: 'managedidentity'
        }
        {
          name: 'AzureWebJobsStorage__clientId'
          value: appIdentity.properties.clientId
        }
        {
          // The identity the app's own storage client (Entra ID) uses.
          name: 'AZURE_CLIENT_ID'
          value: appIdentity.properties.clientId
        }
        {
          name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
          value: insights.properties.ConnectionString
        }
        {
          // No key: the app reaches its tables with its managed identity (Entra ID).
          name: 'TABLETALK_STORAGE_CONNECTION'
          value: 'TableEndpoint=${storage.properties.primaryEndpoints.table}'
        }
        {
          name: 'TABLETALK_TABLE_PREFIX'
          value: tablePrefix
        }
        {
          name: 'TABLETALK_WORKSPACE_ID'
          value: workspaceId
        }
        {
          name: 'TABLETALK_JWKS_URL'
          value: jwksUrl
        }
        {
          name: 'TABLETALK_JWT_ISSUER'
          value: jwtIssuer
        }
        {
          name: 'TABLETALK_JWT_AUDIENCE'
          value: jwtAudience
        }
        {
          name: 'TABLETALK_VAPID_PRIVATE_KEY'
          value: '@Microsoft.KeyVault(VaultName=${vault.name};SecretName=vapid-private-key)'
        }
        {
          name: 'TABLETALK_VAPID_SUBJECT'
          value: vapidSubject
        }
        {
          name: 'TABLETALK_WEBPUBSUB_CONNECTION'
          value: '@Microsoft.KeyVault(SecretUri=${webPubSubSecret.properties.secretUri})'
        }
        {
          name: 'TABLETALK_WEBPUBSUB_HUB'
          value: hub.name
        }
        {
          // Only once the topic delivers somewhere: a topic without a subscription accepts
          // events and drops them. Until then the app notifies in process.
          name: 'TABLETALK_EVENTGRID_ENDPOINT'
          value: createEventSubscription ? topic.properties.endpoint : ''
        }
        {
          name: 'TABLETALK_EVENTGRID_KEY'
          value: createEventSubscription ? '@Microsoft.KeyVault(SecretUri=${topicSecret.properties.secretUri})' : ''
        }
        {
          name: 'TABLETALK_WEBHOOK_SEALING_KEY'
          value: '@Microsoft.KeyVault(VaultName=${vault.name};SecretName=webhook-sealing-key)'
        }
        {
          // No automation topic by default: point these at an Event Grid topic of your own to
          // publish automation events (docs/AUTOMATION_EVENTS.md).
          name: 'TABLETALK_AUTOMATION_EVENTGRID_ENDPOINT'
          value: ''
        }
        {
          name: 'TABLETALK_AUTOMATION_EVENTGRID_KEY'
          value: ''
        }
        {
          name: 'TABLETALK_WRITE_LIMITS'
          value: 'on'
        }
        {
          name: 'TABLETALK_LINK_PREVIEWS'
          value: 'on'
        }
        {
          name: 'TABLETALK_SEARCH_INDEX'
          value: 'on'
        }
        {
          name: 'TABLETALK_NEWCOMER_SECONDS'
          value: string(newcomerSeconds)
        }
        {
          name: 'TABLETALK_TRUST_THRESHOLDS'
          value: trustThresholds
        }
        {
          // No key: links are user delegation SAS signed with a key the managed identity gets
          // (its Storage Blob Data Owner role below covers blobs and the delegation key).
          name: 'TABLETALK_BLOB_CONNECTION'
          value: 'BlobEndpoint=${storage.properties.primaryEndpoints.blob};AccountName=${storage.name}'
        }
        {
          name: 'TABLETALK_ATTACHMENTS_CONTAINER'
          value: attachmentsContainer
        }
        {
          name: 'TABLETALK_ATTACHMENT_MAX_BYTES'
          value: string(attachmentMaxBytes)
        }
        {
          name: 'TABLETALK_ATTACHMENT_TYPES'
          value: attachmentTypes
        }
      ]
    }
  }
}

// ---- What the app's identity may do -------------------------------------------------------

resource storageRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for role in [
    roles.storageBlobDataOwner
    roles.storageTableDataContributor
    roles.storageQueueDataContributor
  ]: {
    name: guid(storage.id, appIdentity.id, role)
    scope: storage
    properties: {
      principalId: appIdentity.properties.principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role)
    }
  }
]

resource vaultRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, appIdentity.id, roles.keyVaultSecretsUser)
  scope: vault
  properties: {
    principalId: appIdentity.properties.principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.keyVaultSecretsUser)
  }
}

// The topic writes undeliverable events into the dead-letter container with its own identity.
resource topicDeadLetterRole 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, topic.id, roles.storageBlobDataContributor)
  scope: storage
  properties: {
    principalId: topic.identity.principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataContributor)
  }
}

// ---- Events to the notification function (second pass: the function must exist) ----------

resource notifySubscription 'Microsoft.EventGrid/topics/eventSubscriptions@2022-06-15' = if (createEventSubscription) {
  parent: topic
  name: notifyFunction
  properties: {
    destination: {
      endpointType: 'AzureFunction'
      properties: {
        resourceId: '${site.id}/functions/${notifyFunction}'
        maxEventsPerBatch: 1
        preferredBatchSizeInKilobytes: 64
      }
    }
    eventDeliverySchema: 'CloudEventSchemaV1_0'
    filter: {
      includedEventTypes: [
        messageEventType
      ]
    }
    retryPolicy: {
      maxDeliveryAttempts: 30
      eventTimeToLiveInMinutes: 1440
    }
    deadLetterWithResourceIdentity: {
      identity: {
        type: 'SystemAssigned'
      }
      deadLetterDestination: {
        endpointType: 'StorageBlob'
        properties: {
          resourceId: storage.id
          blobContainerName: deadLetterContainer
        }
      }
    }
  }
  dependsOn: [
    containers
    topicDeadLetterRole
  ]
}

// ---- What a front-end and an operator need -------------------------------------------------

@description('Base URL of the HTTP API.')
output apiBaseUrl string = 'https://${site.properties.defaultHostName}/api'

@description('Where a front-end gets its live-updates URL (POST, with the bearer token).')
output negotiateUrl string = 'https://${site.properties.defaultHostName}/api/negotiate'

@description('Where a front-end gets the VAPID public key to subscribe to Web Push.')
output vapidPublicKeyUrl string = 'https://${site.properties.defaultHostName}/api/push/vapidPublicKey'

@description('The Function App, for `func azure functionapp publish` or a zip deploy.')
output functionAppName string = site.name

@description('The Web PubSub endpoint (clients get their URL from negotiate).')
output webPubSubEndpoint string = 'https://${webPubSub.properties.hostName}'

@description('The storage account holding the tables.')
output storageAccountName string = storage.name

@description('The Key Vault holding the secrets (rotate them there).')
output keyVaultName string = vault.name
